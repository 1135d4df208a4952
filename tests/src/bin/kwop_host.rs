//! The `kwop` binary, built inside this package so integration tests can run it as a process
//! (`CARGO_BIN_EXE_kwop-host`) exactly as users run `kwop`.

fn main() -> std::process::ExitCode {
    kwop::cli::main()
}
