module kwop.dev/config-sync

go 1.25

require kwop.dev/guest v0.0.0

// The kwop Go SDK, from this repository (see wit/go/README.md to use it from anywhere).
replace kwop.dev/guest => ../../../wit/go
