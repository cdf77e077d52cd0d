package main

import (
	"testing"
	"time"
)

func TestRecorderChecksEachTask(t *testing.T) {
	t.Parallel()
	due := time.Unix(100, 0)
	tests := []struct {
		name                 string
		handle               []uint64
		delivered, dups, bad int
		complete             bool
	}{
		{"every task once", []uint64{10, 11, 12}, 3, 0, 0, true},
		{"one twice", []uint64{10, 11, 11, 12}, 3, 1, 0, true},
		{"one missing", []uint64{10, 12}, 2, 0, 0, false},
		{"one of another phase", []uint64{9, 10, 11, 12, 13}, 3, 0, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRecorder(10, 3)
			for _, n := range tt.handle {
				r.deliver(makePayload(due, n))
			}
			r.deliver([]byte("not a payload"))
			p := phase{lat: r.summary(), want: 3}
			if p.lat.delivered != tt.delivered || p.lat.dups != tt.dups || p.lat.broken != tt.bad+1 {
				t.Errorf("delivered %d dups %d broken %d, want %d %d %d", p.lat.delivered, p.lat.dups, p.lat.broken, tt.delivered, tt.dups, tt.bad+1)
			}
			if p.complete() != tt.complete {
				t.Errorf("complete %v, want %v", p.complete(), tt.complete)
			}
			if p.valid() {
				t.Error("valid with a payload that is not ours")
			}
		})
	}
}

func TestPhaseP99(t *testing.T) {
	t.Parallel()
	wait := 5 * time.Second
	record := func(want int, lates ...time.Duration) phase {
		r := newRecorder(0, want)
		at := time.Unix(1000, 0)
		for i, l := range lates {
			r.record(uint64(i), l, at.Add(time.Duration(i)*time.Millisecond))
		}
		return phase{lat: r.summary(), want: want}
	}
	many := func(n int, d time.Duration) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = d
		}
		return s
	}
	tests := []struct {
		name  string
		p     phase
		want  time.Duration
		bound bool
	}{
		{"late", record(100, many(100, 3*time.Millisecond)...), 3 * time.Millisecond, false},
		// asynq hands tasks out up to a second early: early counts as much as late.
		{"early", record(100, many(100, -400*time.Millisecond)...), 400 * time.Millisecond, false},
		{"1% missing is still exact", record(100, many(99, time.Millisecond)...), time.Millisecond, false},
		{"2% missing is a lower bound", record(100, many(98, time.Millisecond)...), wait, true},
		{"none handled", record(100), wait, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, bound := tt.p.p99(wait)
			if got != tt.want || bound != tt.bound {
				t.Errorf("p99 %v (bound %v), want %v (bound %v)", got, bound, tt.want, tt.bound)
			}
		})
	}
}

func TestBurstRateBound(t *testing.T) {
	t.Parallel()
	wait := 5 * time.Second
	handled := phase{want: 20000, lat: latency{delivered: 20000, throughput: 8000}}
	none := phase{want: 20000}
	tests := []struct {
		name   string
		bursts []phase
		want   float64
		upper  bool
	}{
		{"measured", []phase{handled, handled}, 8000, false},
		{"nothing handled counts as n/wait", []phase{none}, 4000, true},
		{"median of both", []phase{handled, none}, 6000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := &outcome{bursts: tt.bursts}
			got, upper := o.burstRate(wait)
			if got != tt.want || upper != tt.upper {
				t.Errorf("rate %v (upper %v), want %v (upper %v)", got, upper, tt.want, tt.upper)
			}
		})
	}
}
