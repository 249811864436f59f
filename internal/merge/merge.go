// Package merge is the path under which analysis imports the time merge
// of streams; the merge itself, with the merge of a job's runs, is package
// github.com/memrec/memrec/merge. These names are that package's, so the
// path can go once analysis imports it.
package merge

import "github.com/memrec/memrec/merge"

// Iterator is merge.Iterator.
type Iterator[T any] = merge.Iterator[T]

// ByTime is merge.ByTime.
type ByTime[T any] = merge.ByTime[T]

// New is merge.New.
func New[T any](time func(T) int64, its ...Iterator[T]) *ByTime[T] { return merge.New(time, its...) }
