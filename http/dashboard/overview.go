package dashboard

import (
	"fmt"
	"net/http"

	"demosvc/projections"
)

type overviewData struct {
	O         projections.Overview
	Rate      string // completion rate over 30 days, "—" when none ended
	PerDay    chart
	Scores    chart
	FirstDay  string
	Completed int // completed sessions charted in Scores
}

// handleOverview shows the account's counters and charts, read from the
// counters the projections keep: its cost does not grow with the account.
func (db *Dashboard) handleOverview(w http.ResponseWriter, r *http.Request, c *caller) {
	o := db.deps.State.Overview(c.Account.ID, db.deps.Clock())
	d := overviewData{O: o, Rate: "—"}
	if rate := o.Month.CompletionRate(); rate >= 0 {
		d.Rate = fmt.Sprintf("%d%%", rate)
	}
	labels := make([]string, len(o.Days))
	values := make([][]int, len(o.Days))
	for i, day := range o.Days {
		labels[i] = day.Day.Format("Jan 2")
		values[i] = []int{day.Completed, day.Abandoned}
	}
	d.PerDay = newChart("per-day", "Sessions ended per day, last 30 days",
		"Completed (solid) and abandoned (striped) sessions by the UTC day they ended.", "Day",
		seriesOf("per-day", "completed", "abandoned"), labels, values, 5)
	scoreLabels := make([]string, len(o.Scores))
	scoreValues := make([][]int, len(o.Scores))
	for i, n := range o.Scores {
		if i == len(o.Scores)-1 {
			scoreLabels[i] = fmt.Sprintf("%d–100", i*10)
		} else {
			scoreLabels[i] = fmt.Sprintf("%d–%d", i*10, i*10+9)
		}
		scoreValues[i] = []int{n}
		d.Completed += n
	}
	d.Scores = newChart("scores", "Intent score of completed sessions, last 30 days",
		"How many completed sessions ended with each range of intent score.", "Intent score",
		seriesOf("scores", "sessions"), scoreLabels, scoreValues, 1)
	db.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Section: "overview", Data: d})
}
