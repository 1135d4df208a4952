module kwop.dev/guest

go 1.25
