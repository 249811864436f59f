package torchsnap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
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
// later references the empty list of the moment it was memoised: on a real
// ResNet-18 snapshot that lost the stacks of 28 allocations, the 12 of the
// planted leak among them. Lists here are pointers, so every reference sees
// the items appended later.

// list is a Python list: a pointer, so that memo references share it.
type list struct{ items []any }

// dict is a Python dict with string keys (others are kept as their text).
type dict map[string]any

// tuple is a Python tuple.
type tuple []any

var errMark = errors.New("pickle: no mark on the stack")

// decodePickle decodes one pickle from r.
func decodePickle(r *bufio.Reader) (any, error) {
	d := &decoder{r: r, memo: map[uint32]any{}}
	return d.run()
}

type decoder struct {
	r     *bufio.Reader
	stack []any
	marks []int
	memo  map[uint32]any
	buf   []byte
}

func (d *decoder) pop() (any, error) {
	if len(d.stack) == 0 {
		return nil, errors.New("pickle: stack underflow")
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

func (d *decoder) top() (any, error) {
	if len(d.stack) == 0 {
		return nil, errors.New("pickle: stack underflow")
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
	if n < 0 || n > 1<<30 {
		return nil, fmt.Errorf("pickle: length %d out of range", n)
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
	return nil
}

func (d *decoder) get(key uint32) error {
	v, ok := d.memo[key]
	if !ok {
		return fmt.Errorf("pickle: memo key %d not found", key)
	}
	d.stack = append(d.stack, v)
	return nil
}

func (d *decoder) setItems(kv []any) error {
	v, err := d.top()
	if err != nil {
		return err
	}
	m, ok := v.(dict)
	if !ok || len(kv)%2 != 0 {
		return fmt.Errorf("pickle: SETITEMS on %T", v)
	}
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			k = fmt.Sprint(kv[i])
		}
		m[k] = kv[i+1]
	}
	return nil
}

func (d *decoder) appends(items []any) error {
	v, err := d.top()
	if err != nil {
		return err
	}
	l, ok := v.(*list)
	if !ok {
		return fmt.Errorf("pickle: APPENDS on %T", v)
	}
	l.items = append(l.items, items...)
	return nil
}

func (d *decoder) str(n int) error {
	b, err := d.read(n)
	if err != nil {
		return err
	}
	d.stack = append(d.stack, string(b))
	return nil
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
			return nil, fmt.Errorf("pickle: %w", err)
		}
		switch op {
		case 0x80: // PROTO
			if _, err := d.r.ReadByte(); err != nil {
				return nil, err
			}
		case 0x95: // FRAME: a length, the frame's bytes follow
			_, err = d.uint(8)
		case '.': // STOP
			return d.pop()
		case '(': // MARK
			d.marks = append(d.marks, len(d.stack))
		case '0': // POP
			_, err = d.pop()
		case '1': // POP_MARK
			_, err = d.popMark()
		case '2': // DUP
			var v any
			if v, err = d.top(); err == nil {
				d.stack = append(d.stack, v)
			}
		case 'N': // NONE
			d.stack = append(d.stack, nil)
		case 0x88, 0x89: // NEWTRUE, NEWFALSE
			d.stack = append(d.stack, op == 0x88)
		case 'J': // BININT
			var v uint64
			if v, err = d.uint(4); err == nil {
				d.stack = append(d.stack, int64(int32(uint32(v))))
			}
		case 'K', 'M': // BININT1, BININT2
			n := 1
			if op == 'M' {
				n = 2
			}
			var v uint64
			if v, err = d.uint(n); err == nil {
				d.stack = append(d.stack, int64(v))
			}
		case 0x8a, 0x8b: // LONG1, LONG4: little-endian two's complement
			n := 1
			if op == 0x8b {
				n = 4
			}
			var size uint64
			if size, err = d.uint(n); err == nil {
				var b []byte
				if b, err = d.read(int(size)); err == nil {
					d.stack = append(d.stack, long(b))
				}
			}
		case 'G': // BINFLOAT, big-endian
			var b []byte
			if b, err = d.read(8); err == nil {
				d.stack = append(d.stack, math.Float64frombits(binary.BigEndian.Uint64(b)))
			}
		case 0x8c, 'X', 0x8d, 'U', 'T', 'C', 'B', 0x8e: // strings and bytes of 1-, 4- and 8-byte lengths
			n := map[byte]int{0x8c: 1, 'X': 4, 0x8d: 8, 'U': 1, 'T': 4, 'C': 1, 'B': 4, 0x8e: 8}[op]
			var size uint64
			if size, err = d.uint(n); err == nil {
				err = d.str(int(size))
			}
		case '}': // EMPTY_DICT
			d.stack = append(d.stack, dict{})
		case ']': // EMPTY_LIST
			d.stack = append(d.stack, &list{})
		case ')': // EMPTY_TUPLE
			d.stack = append(d.stack, tuple{})
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
				d.stack = append(d.stack, tuple(items))
			}
		case 0x85, 0x86, 0x87: // TUPLE1, TUPLE2, TUPLE3
			n := int(op-0x85) + 1
			if len(d.stack) < n {
				return nil, errors.New("pickle: stack underflow")
			}
			t := append(tuple(nil), d.stack[len(d.stack)-n:]...)
			d.stack = append(d.stack[:len(d.stack)-n], t)
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
			return nil, fmt.Errorf("pickle: opcode %q (0x%02x) is not part of a memory snapshot", op, op)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("pickle: %w", err)
		}
	}
}

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
