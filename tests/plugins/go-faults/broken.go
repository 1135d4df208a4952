package main

// countReasons writes to a map it never made: the mistake whose panic the tests look for.
func countReasons(name string) {
	var counts map[string]int
	counts[name]++
}
