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
