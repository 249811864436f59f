package viewer

import (
	"net/http"

	"github.com/memrec/memrec/storage"
)

type markJSON struct {
	T     int64  `json:"t_us"`
	Kind  string `json:"kind"`
	Text  string `json:"text,omitempty"`
	Epoch *int   `json:"epoch,omitempty"`
	Step  *int   `json:"step,omitempty"`
	GPU   *int   `json:"gpu,omitempty"`
	Code  *int   `json:"code,omitempty"`
}

func markOf(m storage.Mark, start int64) markJSON {
	opt := func(v int) *int {
		if v == storage.None {
			return nil
		}
		return &v
	}
	text := m.Text
	if len(text) > 500 {
		text = text[:500] + "…"
	}
	return markJSON{T: (m.T - start) / 1000, Kind: m.Kind.String(), Text: text, Epoch: opt(m.Epoch), Step: opt(m.Step), GPU: opt(m.GPU), Code: opt(m.Code)}
}

type marksJSON struct {
	Marks []markJSON `json:"marks"`
	More  int        `json:"more"` // marks in the window past the limit
}

func (s *server) marks(w http.ResponseWriter, r *http.Request) {
	rq, err := s.request(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	from, to, err := rq.window()
	if err != nil {
		reply(w, nil, err)
		return
	}
	limit, err := rq.count("limit", defaultMarks, MaxMarks)
	if err != nil {
		reply(w, nil, err)
		return
	}
	marks, more := rq.x.Marks(from, to, limit)
	out := marksJSON{Marks: make([]markJSON, 0, len(marks)), More: more}
	for _, m := range marks {
		out.Marks = append(out.Marks, markOf(m, rq.run.StartNS))
	}
	reply(w, out, nil)
}
