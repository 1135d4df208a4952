//! The `kwop` binary.

fn main() -> std::process::ExitCode {
    kwop::cli::main()
}
