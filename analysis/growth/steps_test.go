package growth

import "testing"

// Steps keep each mark's number where the numbers jump, go back, repeat or
// are None, and find marks by time; a sequence of one stride is one run.
func TestStepsKeepEveryMarksNumber(t *testing.T) {
	marks := []StepMark{{10, 0}, {20, 1}, {30, 2}, {40, 7}, {50, 8}, {60, 3}, {70, 3}, {80, -1}, {90, 0}, {100, 1}}
	s := StepsOf(marks...)
	if s.Len() != len(marks) {
		t.Fatalf("%d marks, want %d", s.Len(), len(marks))
	}
	for i, m := range marks {
		if got := s.At(i); got != m {
			t.Errorf("mark %d: %+v, want %+v", i, got, m)
		}
	}
	if len(s.runs) != 4 { // 0–2, 7–8, 3 3, −1–1
		t.Errorf("%d runs, want 4: %+v", len(s.runs), s.runs)
	}
	for _, marks := range [][]StepMark{{{1, 10}, {2, 20}, {3, 30}, {4, 40}}, {{1, -1}, {2, -1}, {3, -1}}} {
		s := StepsOf(marks...)
		for i, m := range marks {
			if got := s.At(i); got != m {
				t.Errorf("mark %d: %+v, want %+v", i, got, m)
			}
		}
		if len(s.runs) != 1 {
			t.Errorf("%v: %d runs, want 1: %+v", marks, len(s.runs), s.runs)
		}
	}
	if s.Last() != marks[len(marks)-1] {
		t.Errorf("last %+v", s.Last())
	}
	for _, c := range []struct {
		t    int64
		want int
	}{{5, 0}, {10, 0}, {11, 1}, {100, 9}, {101, 10}} {
		if got := s.Search(c.t); got != c.want {
			t.Errorf("Search(%d) = %d, want %d", c.t, got, c.want)
		}
	}
	var none *Steps
	if none.Len() != 0 || none.Search(5) != 0 {
		t.Errorf("nil Steps: %d marks, search %d", none.Len(), none.Search(5))
	}
}

// TestStepsTimes: every mark keeps its time to the nanosecond, across
// blocks, in 4 bytes a mark where each lies whole microseconds after its
// block's first and within 2³² µs of it, and in 8 once one does not (a
// time between microseconds, a mark before the one before, a block longer
// than 71 minutes).
func TestStepsTimes(t *testing.T) {
	const start = int64(1_764_430_000_000_000_000)
	regular := func(n int) []int64 {
		ts := make([]int64, n)
		for i := range ts {
			ts[i] = start + int64(i)*250_123_000 // whole µs
		}
		return ts
	}
	odd, back, gap := regular(3000), regular(3000), regular(3000)
	odd[2500] += 7
	back[1500] = back[1000] // before its block's first
	for i := 2100; i < len(gap); i++ {
		gap[i] += 5e12 // 83 minutes
	}
	for _, tc := range []struct {
		name string
		ts   []int64
		wide bool
	}{
		{"regular", regular(3000), false},
		{"one block", regular(10), false},
		{"a time between microseconds", odd, true},
		{"a mark back in time", back, true},
		{"a long gap in a block", gap, true},
		{"a long gap at a block's start", append(regular(stepBlock), start+9e12, start+9e12+1000), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSteps(len(tc.ts))
			for i, ts := range tc.ts {
				s.Add(ts, i)
			}
			for i, want := range tc.ts {
				if got := s.T(i); got != want {
					t.Fatalf("mark %d at %d, want %d", i, got, want)
				}
			}
			if (s.wide != nil) != tc.wide {
				t.Errorf("8 bytes a mark: %v, want %v", s.wide != nil, tc.wide)
			}
			if !tc.wide {
				if b := float64(4*cap(s.off)+8*cap(s.base)) / float64(len(tc.ts)); b > 4+8 && len(tc.ts) > stepBlock || len(tc.ts) > stepBlock && b > 4.1 {
					t.Errorf("%.2f bytes a mark, want about 4", b)
				}
			}
			if i := s.Search(tc.ts[len(tc.ts)-1]); s.T(i) != tc.ts[len(tc.ts)-1] {
				t.Errorf("Search of the last time: mark %d", i)
			}
		})
	}
}
