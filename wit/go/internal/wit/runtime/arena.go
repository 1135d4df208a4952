// kwop: the memory `cabi_realloc` hands to the host, kept off the Go heap.
//
// Upstream's `cabi_realloc` allocates on the Go heap. When the host lowers a large argument or
// import result (a few MB), such an allocation can start a garbage collection, the collector
// reads the wall clock (`wasi:clocks/wall-clock.now`), and calling an import from inside
// `cabi_realloc` is forbidden by the component model: "wasm trap: cannot leave component
// instance" (wasmtime#14318, componentize-go#77). Here `cabi_realloc` bumps through chunks taken
// from the linear memory with `runtime.sbrk` (as upstream already does before the runtime is
// initialised): the collector never sees that memory, so nothing inside `cabi_realloc` can start
// a collection or call out.
//
// Strings and lists the host passes in alias this memory (the generated code lifts them without
// copying). `ResetArena` makes it reusable; call it only when nothing can still refer to what the
// host passed in (the kwop SDK calls it when a reconcile returns: it decodes everything it hands
// to user code into Go values first). A kwop instance serves one call, so without a reset the
// memory simply goes away with the instance.
//
// Not everything is the host's: the WASI adapter allocates its stack and its state through
// `cabi_realloc` too, on its first use (during `_initialize`, when the Go runtime starts), and
// keeps them for the instance's life. `MarkArena` (called by the SDK from an init function, after
// that) closes the chunks allocated so far: `ResetArena` reuses only the chunks taken after it.

package runtime

import "unsafe"

// Chunks are at least this big (the linear memory grows in 64 KiB pages).
const arenaChunkSize = 256 << 10

// wasm page size: runtime.sbrk rounds every request up to it.
const arenaPage = 64 << 10

// Each chunk starts with a header: the address of the next chunk (0: last) and its size.
type arenaHeader struct {
	next uintptr
	size uintptr
}

const arenaHeaderSize = unsafe.Sizeof(arenaHeader{})

var (
	arenaFirst  uintptr // first chunk, 0 before the first allocation
	arenaCur    uintptr // chunk being filled
	arenaNext   uintptr // first free byte in arenaCur
	arenaMarked bool    // MarkArena was called
	arenaReuse  uintptr // first chunk taken after MarkArena: where ResetArena starts again
)

func arenaChunk(at uintptr) *arenaHeader {
	return (*arenaHeader)(unsafe.Pointer(at)) //nolint:govet // not Go heap memory
}

// arenaAlloc returns size bytes aligned to align (a power of two), or nil for size 0. It never
// allocates on the Go heap and never calls an import.
func arenaAlloc(size, align uintptr) unsafe.Pointer {
	if size == 0 {
		return nil
	}
	if align == 0 || align&(align-1) != 0 {
		panic("cabi_realloc: alignment is not a power of two")
	}
	for arenaCur != 0 {
		c := arenaChunk(arenaCur)
		p := (arenaNext + align - 1) &^ (align - 1)
		if p >= arenaNext && size <= arenaCur+c.size-p {
			arenaNext = p + size
			return unsafe.Pointer(p) //nolint:govet // not Go heap memory
		}
		if c.next == 0 {
			break
		}
		// After a reset: reuse the chunks taken earlier, in order.
		arenaCur = c.next
		arenaNext = arenaCur + arenaHeaderSize
	}
	n := arenaHeaderSize + size + align
	if n < size { // overflow
		panic("cabi_realloc: allocation too large")
	}
	if n < arenaChunkSize {
		n = arenaChunkSize
	}
	n = (n + arenaPage - 1) &^ (arenaPage - 1)
	base := uintptr(sbrk(n))
	if base == 0 {
		// The instance's memory limit: trap rather than hand the host address 0.
		panic("cabi_realloc: out of memory")
	}
	*arenaChunk(base) = arenaHeader{size: n}
	if arenaMarked && arenaReuse == 0 {
		arenaReuse = base
	}
	if arenaCur == 0 {
		arenaFirst = base
	} else {
		arenaChunk(arenaCur).next = base
	}
	arenaCur = base
	arenaNext = base + arenaHeaderSize
	return arenaAlloc(size, align)
}

// MarkArena keeps what was allocated so far for good: later allocations start a new chunk, and
// ResetArena reuses only those.
func MarkArena() {
	arenaMarked = true
	if arenaCur != 0 {
		arenaNext = arenaCur + arenaChunk(arenaCur).size // the current chunk takes no more
	}
}

// ResetArena makes the chunks taken after MarkArena reusable by later `cabi_realloc` calls.
// Whatever the host passed in since must no longer be used. Without MarkArena it does nothing.
func ResetArena() {
	if arenaReuse != 0 {
		arenaCur = arenaReuse
		arenaNext = arenaReuse + arenaHeaderSize
	}
}
