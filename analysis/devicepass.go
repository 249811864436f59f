package analysis

import (
	"slices"
	"strconv"

	"github.com/memrec/memrec/storage"
)

// addAll places samples in every tracker but the query times, and returns
// their lowest and highest value (xs must not be empty).
func (v view) addAll(ts, xs []int64) (lo, hi int64) {
	lo, hi = v.floors.addAll(ts, xs)
	v.addBlock(ts, xs, lo, hi)
	return lo, hi
}

// addAllWith is addAll, and floors.addAll(ts, ws) with v's floors'
// walk (addAll2): ws are values of the same samples for another tracker
// of the same spans. It returns the extremes of xs and of ws.
func (v view) addAllWith(floors *spans, ts, xs, ws []int64) (lo, hi, lo2, hi2 int64) {
	lo, hi, lo2, hi2 = addAll2(v.floors, floors, ts, xs, ws)
	v.addBlock(ts, xs, lo, hi)
	return lo, hi, lo2, hi2
}

// addBlock places samples whose extremes are lo and hi in the long spans.
// Epochs, slices and inferred epochs are long: a block of samples is
// mostly inside one of each, which then takes the block's extremes.
func (v view) addBlock(ts, xs []int64, lo, hi int64) {
	v.epochs.addBlock(ts, xs, lo, hi)
	v.slices.addBlock(ts, xs, lo, hi)
	v.inferred.addBlock(ts, xs, lo, hi)
}

// devicePass reads the device samples: the used and driver-reserved
// timelines, the peak, and the used memory where later passes need it.
// The GPU's process samples share the device series' chunks, and are read
// in the same walk for the processes pass (procTrack).
func (a *gpuAnalysis) devicePass() error {
	if !a.hasDevice && len(a.procPIDs) == 0 {
		return nil
	}
	for _, pid := range a.procPIDs {
		a.procs = append(a.procs, a.newProcTrack(pid))
	}
	gr := a.gr
	tl := newM4(a.start, a.end, a.opts.Width, &gr.Timeline.Used)
	tld := newM4(a.start, a.end, a.opts.Width, &gr.Timeline.DriverReserved)
	driverReserved := false
	// A window's first marks (its first epoch's start) take the last
	// sample before it, as marks inside a run do.
	if before, ok := a.run.Before(windowLookBack); ok && a.hasDevice {
		it := a.db.DeviceSamples(before, a.g.Index, storage.MinTime, storage.MaxTime)
		for it.Next() {
			a.used.at.add(it.At().T, it.At().Used)
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	b := a.db.DeviceGroupBlocks(a.run, a.g.Index, a.procPIDs, storage.MinTime, storage.MaxTime)
	var peak storage.DeviceSample
	first := true
	for b.Next() {
		ts := b.T(0)
		// The first process with the device's times (the common case: the
		// device's rows) is walked with the device below.
		paired := -1
		for i, p := range a.procs {
			pts := b.T(i + 1)
			if len(pts) == 0 {
				continue
			}
			a.readSamples(len(pts))
			if paired < 0 && len(pts) == len(ts) && &pts[0] == &ts[0] {
				paired = i
				continue
			}
			p.add(pts, b.Ints(i+1, storage.ProcUsed))
		}
		a.readSamples(len(ts))
		if len(ts) == 0 {
			continue
		}
		used, res := b.Ints(0, storage.DeviceUsed), b.Ints(0, storage.DeviceReserved)
		// The block's extremes say whether any sample had some, and the
		// most: a look at each sample without a branch, or none where the
		// chunk stored one value (the driver's reserved, as a rule).
		rlo, rhi := res[0], res[0]
		if !b.OneValue(0, storage.DeviceReserved) {
			rlo, rhi = extremes(res)
		}
		tld.addBlock(ts, res, rlo, rhi)
		driverReserved = driverReserved || rlo != 0 || rhi != 0
		if rhi > 0 && (gr.DriverReservedBytes == nil || rhi > *gr.DriverReservedBytes) {
			gr.DriverReservedBytes = i64(rhi)
		}
		a.used.at.addAll(ts, used)
		var lo, hi int64
		if paired >= 0 {
			p, pused := a.procs[paired], b.Ints(paired+1, storage.ProcUsed)
			var plo, phi int64
			lo, hi, plo, phi = a.used.addAllWith(p.floors, ts, used, pused)
			p.took(ts, pused, plo, phi)
		} else {
			lo, hi = a.used.addAll(ts, used)
		}
		if first || hi > peak.Used {
			i := slices.Index(used, hi) // the first sample of the highest
			peak, first = storage.DeviceSample{T: ts[i], GPU: a.g.Index, Used: hi, Reserved: res[i]}, false
		}
		a.oomUsed.addAll(ts, used)
		if l := a.opts.Lines; l != nil {
			l.AddDeviceColumns(a.g.Index, ts, used, res)
		}
		tl.addBlock(ts, used, lo, hi)
		a.lastUsed = used[len(used)-1]
	}
	if err := b.Err(); err != nil {
		return err
	}
	if !a.hasDevice {
		return nil
	}
	tl.flush()
	tld.flush()
	if !driverReserved {
		gr.Timeline.DriverReserved = Series{Name: gr.Timeline.DriverReserved.Name}
	}
	a.used.at.done()
	a.oomUsed.done()
	if !first {
		gr.PeakUsedBytes = i64(peak.Used)
		gr.Peaks = append(gr.Peaks, makePeak("device_used", peak.Used, peak.T, a.mi, a.steps))
	}
	return nil
}

// processes sets each process's figures from its NVML samples, which the
// device pass read: its peak, timeline and the growth of its floors.
func (a *gpuAnalysis) processes() {
	gr := a.gr
	for _, t := range a.procs {
		t.tl.flush()
		if g, ok := a.growthOfSpans("used", t.floors); ok {
			t.p.Growth = &g
		}
		gr.Processes = append(gr.Processes, t.p)
		gr.Timeline.Procs = append(gr.Timeline.Procs, *t.ser)
	}
}

func (a *gpuAnalysis) newProcTrack(pid int) *procTrack {
	t := &procTrack{p: Process{PID: pid, Source: "nvml"}, ser: &Series{Name: "pid " + strconv.Itoa(pid)}, floors: newSpans(a.flo, a.fhi, keepMin, a.cols)}
	if pid == storage.OtherPID {
		t.ser.Name = "other processes" // past storage.MaxPIDsPerGPU
	}
	t.tl = newM4(a.start, a.end, a.opts.Width, t.ser)
	return t
}
