//go:build !linux || !cgo

package recorder

import "time"

const (
	nativeTick = iota + 1
	nativeMissed
	nativeDevice
	nativeProc
	nativeMemErr
	nativeProcErr
)

type nativeRecord struct {
	Kind, GPU int
	T, A, B   int64
}

// nativeLoop needs Linux and cgo; without them the sampler samples from Go.
type nativeLoop struct{}

func startNativeLoop(string, []int, time.Duration, bool, time.Duration) (*nativeLoop, error) {
	return nil, errNoLoop
}

func (*nativeLoop) drain(func(nativeRecord)) int64 { return 0 }
func (*nativeLoop) stop(func(nativeRecord)) int64  { return 0 }
