package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	got := Normalize(Spec{Cron: "  0   3 *  * * ", Every: " 15m ", TZ: " UTC "})
	if got.Cron != "0 3 * * *" || got.Every != "15m" || got.TZ != "UTC" {
		t.Errorf("%+v", got)
	}
	if s := (Spec{Cron: "*/5 * * * *"}); Normalize(s) != s {
		t.Errorf("a normal spec changed: %+v", Normalize(s))
	}
}

// The seed's cron validation list: 5 and 6 fields accepted, 4 fields and
// illegal characters refused with the expression and the reason.
func TestCompileCron(t *testing.T) {
	for _, ok := range []string{"0 3 * * *", "*/5 * * * *", "30 0 3 * * *", "@hourly", "0 9 * * MON-FRI"} {
		if _, err := Compile(Spec{Cron: ok}); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for expr, want := range map[string]string{
		"0 3 * *":     `Invalid cron expression "0 3 * *": expected 5 to 6 fields, found 4`,
		"0 3 * * % ":  `Invalid cron expression "0 3 * * %": `,
		"61 * * * *":  `Invalid cron expression "61 * * * *": `,
		"0 3 * * * x": `Invalid cron expression "0 3 * * * x": `,
	} {
		_, err := Compile(Spec{Cron: expr})
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: got %v, want %s...", expr, err, want)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{}, "give exactly one of --cron EXPR, --every DURATION or --at TIME"},
		{Spec{Cron: "@daily", Every: "1h"}, "give exactly one of"},
		{Spec{Every: "soon"}, `--every "soon": not a duration`},
		{Spec{Every: "10ms"}, `--every "10ms": at least 1s`},
		{Spec{At: "tomorrow"}, `--at "tomorrow": not a time`},
		{Spec{Cron: "@daily", TZ: "Mars/Olympus"}, `--tz "Mars/Olympus": not a time zone`},
	} {
		_, err := Compile(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.spec, err, c.want)
		}
	}
	c, err := Compile(Spec{At: "2026-06-01 11:00", TZ: "UTC"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckNew(now); err == nil || !strings.Contains(err.Error(), "is in the past") {
		t.Errorf("a past --at: %v", err)
	}
}

// The seed's backoff list: 1, 5, 15, 60 minutes, then 60.
func TestBackoff(t *testing.T) {
	want := []time.Duration{0, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, time.Hour, time.Hour}
	for n, w := range want {
		if got := Backoff(n); got != w {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, w)
		}
	}
	if MaxFailures != 5 {
		t.Errorf("the fifth failure disables: MaxFailures = %d", MaxFailures)
	}
}

func TestDue(t *testing.T) {
	start := time.Date(2026, 6, 1, 0, 0, 30, 0, time.UTC)
	every, _ := Compile(Spec{Every: "1h"})
	if _, _, ok := every.Due(start, time.Time{}, start.Add(59*time.Minute)); ok {
		t.Error("an interval is due before its first period")
	}
	// Five periods missed collapse into one firing, the latest.
	due, n, ok := every.Due(start, time.Time{}, start.Add(5*time.Hour+10*time.Minute))
	if !ok || n != 5 || !due.Equal(start.Add(5*time.Hour)) {
		t.Errorf("every: %s %d %v", due, n, ok)
	}
	if _, _, ok := every.Due(start, due, due.Add(30*time.Minute)); ok {
		t.Error("due again before the next period")
	}

	cron, _ := Compile(Spec{Cron: "0 3 * * *", TZ: "Europe/Paris"})
	due, n, ok = cron.Due(start, time.Time{}, time.Date(2026, 6, 4, 12, 0, 0, 0, time.UTC))
	paris, _ := time.LoadLocation("Europe/Paris")
	// 3:00 in Paris on the 1st (start is 2:00:30 there), 2nd, 3rd and 4th.
	if !ok || n != 4 || !due.Equal(time.Date(2026, 6, 4, 3, 0, 0, 0, paris)) {
		t.Errorf("cron: %s %d %v", due, n, ok)
	}
	// A seconds field far behind: the latest due time, the count capped.
	secs, _ := Compile(Spec{Cron: "* * * * * *"})
	due, n, ok = secs.Due(start, time.Time{}, start.Add(48*time.Hour))
	if !ok || n != maxMissedCount || !due.Equal(start.Add(48*time.Hour)) {
		t.Errorf("seconds: %s %d %v", due, n, ok)
	}

	// The seed's one-shot list: due once its time has come, never again.
	at, _ := Compile(Spec{At: "2026-06-02T09:00:00Z"})
	if _, _, ok := at.Due(start, time.Time{}, time.Date(2026, 6, 2, 8, 59, 0, 0, time.UTC)); ok {
		t.Error("one-shot due early")
	}
	due, n, ok = at.Due(start, time.Time{}, time.Date(2026, 6, 3, 0, 0, 0, 0, time.UTC))
	if !ok || n != 1 || !due.Equal(time.Date(2026, 6, 2, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("one-shot: %s %d %v", due, n, ok)
	}
	if _, _, ok := at.Due(start, due, due.Add(time.Hour)); ok {
		t.Error("a one-shot fired twice")
	}
	if !at.OneShot() || every.OneShot() {
		t.Error("OneShot")
	}
}
