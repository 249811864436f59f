package torchsnap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
)

// This file decodes the part of Python's pickle format that a snapshot
// uses: dicts, lists, tuples, strings, bytes, integers, floats, booleans
// and None, with the memo (protocol 2 to 5). Classes and other objects are
// refused with an error that names the opcode.
//
// Why not a general pickle library: a pickler memoises a list when it is
// created, before its items are appended, and refers to it again by memo
// index when the same list object appears twice. Torch shares one frames
// list between every block and trace entry with the same stack, so those
// references matter. A decoder that memoises Go slices by value gives the
// later references the empty list of the moment it was memoised, and
// allocations lose their stacks. Lists here are pointers, so every
// reference sees the items appended later.

// list is a Python list: a pointer, so that memo references share it.
type list struct{ items []any }

// dict is a Python dict with string keys (others are kept as their text).
type dict map[string]any

// tuple is a Python tuple.
type tuple []any

var (
	errMark      = errors.New("no mark on the stack")
	errUnderflow = errors.New("stack underflow")
)

// decodePickle decodes one pickle from r within lim.
func decodePickle(r *bufio.Reader, lim Limits) (any, error) {
	d := &decoder{r: r, memo: map[uint32]any{}, lim: lim}
	return d.run()
}

type decoder struct {
	r     *bufio.Reader
	stack []any
	marks []int
	memo  map[uint32]any
	buf   []byte

	// What the program has built so far, against lim: every value pushed,
	// mark set, memo entry and container slot filled is one element (at
	// most a few tens of bytes each), every string's bytes count in
	// strBytes. Together they bound the decoder's memory by the input's
	// work, not by its size: an opcode of one byte (EMPTY_LIST, a memo
	// reference appended) is one element.
	lim      Limits
	elements int64
	strBytes int64
}

// grow counts n more elements, refusing past the limit.
func (d *decoder) grow(n int) error {
	d.elements += int64(n)
	if d.elements > d.lim.Elements {
		return &LimitError{What: "values", Limit: d.lim.Elements}
	}
	return nil
}

// push puts v on the stack, counting it.
func (d *decoder) push(v any) error {
	d.stack = append(d.stack, v)
	return d.grow(1)
}

func (d *decoder) pop() (any, error) {
	if len(d.stack) == 0 {
		return nil, errUnderflow
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

func (d *decoder) top() (any, error) {
	if len(d.stack) == 0 {
		return nil, errUnderflow
	}
	return d.stack[len(d.stack)-1], nil
}

// popMark returns the items above the last mark and removes them and it.
func (d *decoder) popMark() ([]any, error) {
	if len(d.marks) == 0 {
		return nil, errMark
	}
	k := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	if k > len(d.stack) {
		return nil, errMark
	}
	items := append([]any(nil), d.stack[k:]...)
	d.stack = d.stack[:k]
	return items, nil
}

func (d *decoder) read(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("length %d out of range", n)
	}
	if n > 1<<16 { // grow with the data, not with what a corrupt length claims
		b, err := io.ReadAll(io.LimitReader(d.r, int64(n)))
		if err == nil && len(b) < n {
			err = io.ErrUnexpectedEOF
		}
		return b, err
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	b := d.buf[:n]
	_, err := io.ReadFull(d.r, b)
	return b, err
}

func (d *decoder) uint(n int) (uint64, error) {
	b, err := d.read(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

func (d *decoder) memoize(key uint32) error {
	v, err := d.top()
	if err != nil {
		return err
	}
	d.memo[key] = v
	return d.grow(1)
}

func (d *decoder) get(key uint32) error {
	v, ok := d.memo[key]
	if !ok {
		return fmt.Errorf("memo key %d not found", key)
	}
	return d.push(v)
}

func (d *decoder) setItems(kv []any) error {
	v, err := d.top()
	if err != nil {
		return err
	}
	m, ok := v.(dict)
	if !ok {
		return fmt.Errorf("SETITEMS on a %s, not a dict", pyType(v))
	}
	if len(kv)%2 != 0 {
		return fmt.Errorf("SETITEMS with %d items, not key and value pairs", len(kv))
	}
	for i := 0; i < len(kv); i += 2 {
		m[keyString(kv[i])] = kv[i+1]
	}
	return d.grow(len(kv) / 2)
}

func (d *decoder) appends(items []any) error {
	v, err := d.top()
	if err != nil {
		return err
	}
	l, ok := v.(*list)
	if !ok {
		return fmt.Errorf("APPENDS on a %s, not a list", pyType(v))
	}
	l.items = append(l.items, items...)
	return d.grow(len(items))
}

// str reads a string or bytes of n bytes, within the limits of one
// string and of all strings, before reading any of it.
func (d *decoder) str(n uint64) error {
	if n > uint64(d.lim.String) {
		return &LimitError{What: "bytes in one string", Limit: int64(d.lim.String), Got: int64(min(n, 1<<62))}
	}
	if d.strBytes += int64(n); d.strBytes > d.lim.StringBytes {
		return &LimitError{What: "bytes of strings", Limit: d.lim.StringBytes}
	}
	b, err := d.read(int(n))
	if err != nil {
		return err
	}
	return d.push(string(b))
}

// keyString is a dict key as memrec keeps it: a snapshot's keys are
// strings; an int is kept as its digits, anything else by its type alone,
// so that formatting a key never costs more than the key's own bytes (a
// tuple of shared tuples can stand for 2^40 leaves in 88 bytes).
func keyString(k any) string {
	switch v := k.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "None"
	}
	return "<" + pyType(k) + ">"
}

// pyType names a decoded value's Python type, for messages.
func pyType(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case dict:
		return "dict"
	case *list:
		return "list"
	case tuple:
		return "tuple"
	}
	return "value"
}

// run executes the pickle program until STOP and returns what it built.
//
// It is long on purpose: it is the pickle machine's opcode table, one case
// per opcode (or family of opcodes) in the order of Python's pickletools
// listing, each a few lines of stack work; read top to bottom it is the
// list of what a memory snapshot may contain, and anything else is refused
// in one place.
func (d *decoder) run() (any, error) {
	for {
		op, err := d.r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		switch op {
		case 0x80: // PROTO
			_, err = d.r.ReadByte()
		case 0x95: // FRAME: a length, the frame's bytes follow
			_, err = d.uint(8)
		case '.': // STOP
			return d.pop()
		case '(': // MARK
			d.marks = append(d.marks, len(d.stack))
			err = d.grow(1)
		case '0': // POP
			_, err = d.pop()
		case '1': // POP_MARK
			_, err = d.popMark()
		case '2': // DUP
			var v any
			if v, err = d.top(); err == nil {
				err = d.push(v)
			}
		case 'N': // NONE
			err = d.push(nil)
		case 0x88, 0x89: // NEWTRUE, NEWFALSE
			err = d.push(op == 0x88)
		case 'J': // BININT
			var v uint64
			if v, err = d.uint(4); err == nil {
				err = d.push(int64(int32(uint32(v))))
			}
		case 'K', 'M': // BININT1, BININT2
			n := 1
			if op == 'M' {
				n = 2
			}
			var v uint64
			if v, err = d.uint(n); err == nil {
				err = d.push(int64(v))
			}
		case 0x8a, 0x8b: // LONG1, LONG4: little-endian two's complement
			n := 1
			if op == 0x8b {
				n = 4
			}
			var size uint64
			if size, err = d.uint(n); err == nil {
				if size > maxLongBytes {
					err = fmt.Errorf("an integer of %d bytes (at most %d are read)", size, maxLongBytes)
					break
				}
				var b []byte
				if b, err = d.read(int(size)); err == nil {
					err = d.push(long(b))
				}
			}
		case 'G': // BINFLOAT, big-endian
			var b []byte
			if b, err = d.read(8); err == nil {
				err = d.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
			}
		case 0x8c, 'X', 0x8d, 'U', 'T', 'C', 'B', 0x8e: // strings and bytes of 1-, 4- and 8-byte lengths
			n := map[byte]int{0x8c: 1, 'X': 4, 0x8d: 8, 'U': 1, 'T': 4, 'C': 1, 'B': 4, 0x8e: 8}[op]
			var size uint64
			if size, err = d.uint(n); err == nil {
				err = d.str(size)
			}
		case '}': // EMPTY_DICT
			err = d.push(dict{})
		case ']': // EMPTY_LIST
			err = d.push(&list{})
		case ')': // EMPTY_TUPLE
			err = d.push(tuple{})
		case 's': // SETITEM
			var k, v any
			if v, err = d.pop(); err == nil {
				if k, err = d.pop(); err == nil {
					err = d.setItems([]any{k, v})
				}
			}
		case 'u': // SETITEMS
			var kv []any
			if kv, err = d.popMark(); err == nil {
				err = d.setItems(kv)
			}
		case 'a': // APPEND
			var v any
			if v, err = d.pop(); err == nil {
				err = d.appends([]any{v})
			}
		case 'e': // APPENDS
			var items []any
			if items, err = d.popMark(); err == nil {
				err = d.appends(items)
			}
		case 't': // TUPLE
			var items []any
			if items, err = d.popMark(); err == nil {
				err = d.push(tuple(items))
			}
		case 0x85, 0x86, 0x87: // TUPLE1, TUPLE2, TUPLE3
			n := int(op-0x85) + 1
			if len(d.stack) < n {
				return nil, errUnderflow
			}
			t := append(tuple(nil), d.stack[len(d.stack)-n:]...)
			d.stack = d.stack[:len(d.stack)-n]
			err = d.push(t)
		case 0x94: // MEMOIZE
			err = d.memoize(uint32(len(d.memo)))
		case 'q', 'r': // BINPUT, LONG_BINPUT
			n := 1
			if op == 'r' {
				n = 4
			}
			var k uint64
			if k, err = d.uint(n); err == nil {
				err = d.memoize(uint32(k))
			}
		case 'h', 'j': // BINGET, LONG_BINGET
			n := 1
			if op == 'j' {
				n = 4
			}
			var k uint64
			if k, err = d.uint(n); err == nil {
				err = d.get(uint32(k))
			}
		default:
			return nil, fmt.Errorf("opcode %q (0x%02x) is not part of a memory snapshot", op, op)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// maxLongBytes bounds a LONG1/LONG4 integer: a snapshot's integers are
// addresses, sizes and times, 8 bytes at most; a *big.Int of up to 64
// bytes is kept (and then not used) rather than refused.
const maxLongBytes = 64

// long decodes a little-endian two's-complement integer: an int64 when it
// fits, else a *big.Int.
func long(b []byte) any {
	if len(b) == 0 {
		return int64(0)
	}
	if len(b) <= 8 {
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		shift := 64 - 8*uint(len(b))
		return int64(v<<shift) >> shift
	}
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	n := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return n
}
