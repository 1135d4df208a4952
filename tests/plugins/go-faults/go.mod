module kwop.dev/go-faults

go 1.25

require kwop.dev/guest v0.0.0

replace kwop.dev/guest => ../../../wit/go
