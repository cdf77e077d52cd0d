package measure

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Kind says whether a floor may fail a run.
type Kind string

const (
	// Robust floors hold with a wide margin even on a shared 2-core
	// machine; -strict fails the run when one fails or cannot be judged.
	Robust Kind = "robust"
	// Tight floors sit within the machine's noise of their target; they
	// are printed, never failing a run.
	Tight Kind = "tight"
)

// Status is a floor's verdict in one run.
type Status string

const (
	Pass      Status = "PASS"
	Fail      Status = "FAIL"
	Met       Status = "met (tight, not failing)"
	Missed    Status = "missed (tight, not failing)"
	NotJudged Status = "not judged"
	Skipped   Status = "SKIP"
)

// NotRedis is the reason a timing floor is not judged on miniredis.
const NotRedis = "miniredis is not Redis"

// Floor is one named row of the floors table.
type Floor struct {
	Subject string `json:"subject"` // tiers, delay, peers
	Name    string `json:"name"`
	Want    string `json:"want"`  // the floor, e.g. "≤ 1.30×"
	Value   string `json:"value"` // what this run measured
	Kind    Kind   `json:"kind"`
	Status  Status `json:"status"`
	Why     string `json:"why,omitempty"` // for NotJudged and Skipped
	Note    string `json:"note,omitempty"`
}

// Floors is the one table of a run's floors, tiers and delay alike.
type Floors struct {
	Rows []Floor
}

// Judge adds f with its verdict: PASS/FAIL for a robust floor, met/missed
// for a tight one.
func (t *Floors) Judge(f Floor, ok bool) {
	switch {
	case f.Kind == Tight && ok:
		f.Status = Met
	case f.Kind == Tight:
		f.Status = Missed
	case ok:
		f.Status = Pass
	default:
		f.Status = Fail
	}
	t.Rows = append(t.Rows, f)
}

// JudgeIf is Judge when judged, else the row is added as not judged, why.
func (t *Floors) JudgeIf(judged bool, why string, f Floor, ok bool) {
	if !judged {
		f.Status, f.Why = NotJudged, why
		t.Rows = append(t.Rows, f)
		return
	}
	t.Judge(f, ok)
}

// Skip adds f as not measured in this run, why.
func (t *Floors) Skip(f Floor, why string) {
	f.Status, f.Why = Skipped, why
	t.Rows = append(t.Rows, f)
}

// Add appends rows judged elsewhere (another process's table).
func (t *Floors) Add(rows ...Floor) { t.Rows = append(t.Rows, rows...) }

// Failures are the robust rows that FAILed, and, when strict, the robust
// rows that could not be judged although this run's backend judges them
// (a floor -strict cannot check is not a floor that held).
func (t *Floors) Failures(strict bool) []Floor {
	var out []Floor
	for _, f := range t.Rows {
		if f.Kind != Robust {
			continue
		}
		if f.Status == Fail || (strict && f.Status == Skipped) {
			out = append(out, f)
		}
	}
	return out
}

// Print writes the table.
func (t *Floors) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "subject\tfloor\twant\tmeasured\tverdict\tnote")
	for _, f := range t.Rows {
		verdict := string(f.Status)
		if f.Why != "" {
			verdict += " (" + f.Why + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Subject, f.Name, f.Want, f.Value, verdict, f.Note)
	}
	_ = tw.Flush()
}

// WriteJSON writes the rows as one JSON array (for a parent process).
func (t *Floors) WriteJSON(w io.Writer) error { return json.NewEncoder(w).Encode(t.Rows) }

// ReadJSON reads rows written by WriteJSON.
func ReadJSON(data []byte) ([]Floor, error) {
	var rows []Floor
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("measure: floors JSON: %w", err)
	}
	return rows, nil
}
