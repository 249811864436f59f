package viewer

import (
	"net/http"
	"time"

	"github.com/memrec/memrec/series"
)

type atJSON struct {
	TUS   int64        `json:"t_us"`
	Lines []atLineJSON `json:"lines"`
	Marks []markJSON   `json:"marks"`
	Stale string       `json:"stale,omitempty"`
}

type atLineJSON struct {
	Key string `json:"key"`
	Has bool   `json:"has"`           // a sample at or before t exists
	T   int64  `json:"t_us"`          // its time
	V   int64  `json:"v"`             // its value
	Age int64  `json:"age_us"`        // t - its time
	Off bool   `json:"off,omitempty"` // the line ended before t (its newest sample is older than a second before t)
}

func (s *server) at(w http.ResponseWriter, r *http.Request) {
	rq, err := s.request(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	t, err := rq.seconds("t", nil)
	if err != nil {
		reply(w, nil, err)
		return
	}
	zero := 0.0
	near, err := rq.seconds("near", &zero)
	if err != nil {
		reply(w, nil, err)
		return
	}
	if near -= rq.run.StartNS; near < 0 {
		reply(w, nil, badRequest("near: want seconds ≥ 0"))
		return
	}
	var keys []series.Key
	if len(rq.q["line"]) > 0 {
		if keys, err = rq.keys(); err != nil {
			reply(w, nil, err)
			return
		}
	} else {
		keys = rq.x.Keys()
	}
	us := func(t int64) int64 { return (t - rq.run.StartNS) / 1000 }
	out := atJSON{TUS: us(t), Lines: []atLineJSON{}, Marks: []markJSON{}, Stale: rq.stale}
	for _, k := range keys {
		st, v, ok, err := rq.x.At(k, t, rq.raw(k))
		if err != nil {
			reply(w, nil, err)
			return
		}
		l := atLineJSON{Key: k.String(), Has: ok}
		if ok {
			l.T, l.V, l.Age = us(st), v, (t-st)/1000
			last, _ := rq.x.Last(k)
			l.Off = last < t-int64(time.Second) && st == last
		}
		out.Lines = append(out.Lines, l)
	}
	marks, _ := rq.x.Marks(t-near, t+near+1, 50)
	for _, m := range marks {
		out.Marks = append(out.Marks, markOf(m, rq.run.StartNS))
	}
	reply(w, out, nil)
}
