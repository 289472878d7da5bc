package notify

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
)

// Quiet hours hold a message back until they end, in the person's time
// zone, across midnight too; outside them nothing waits.
func TestQuietUntil(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database")
	}
	hm := func(h, m int) pgtype.Int2 { return pgtype.Int2{Int16: int16(h*60 + m), Valid: true} }
	for _, c := range []struct {
		name       string
		now        time.Time
		start, end pgtype.Int2
		zone       string
		quiet      bool
		until      time.Time
	}{
		{"inside a window that wraps midnight, before it", time.Date(2026, 11, 27, 23, 30, 0, 0, berlin), hm(22, 0), hm(7, 0), "Europe/Berlin", true, time.Date(2026, 11, 28, 7, 0, 0, 0, berlin)},
		{"inside a window that wraps midnight, after it", time.Date(2026, 11, 28, 3, 15, 0, 0, berlin), hm(22, 0), hm(7, 0), "Europe/Berlin", true, time.Date(2026, 11, 28, 7, 0, 0, 0, berlin)},
		{"outside a window that wraps midnight", time.Date(2026, 11, 28, 12, 0, 0, 0, berlin), hm(22, 0), hm(7, 0), "Europe/Berlin", false, time.Time{}},
		{"inside a day window", time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), hm(9, 0), hm(17, 30), "UTC", true, time.Date(2026, 11, 28, 17, 30, 0, 0, time.UTC)},
		{"at its end", time.Date(2026, 11, 28, 17, 30, 0, 0, time.UTC), hm(9, 0), hm(17, 30), "UTC", false, time.Time{}},
		{"no quiet hours", time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), pgtype.Int2{}, pgtype.Int2{}, "UTC", false, time.Time{}},
	} {
		s := &Service{now: func() time.Time { return c.now }}
		until, quiet := s.quietUntil(db.ClaimNotificationsRow{QuietStart: c.start, QuietEnd: c.end, TimeZone: c.zone})
		if quiet != c.quiet || !until.Equal(c.until) {
			t.Errorf("%s: quiet %v until %v, want %v until %v", c.name, quiet, until, c.quiet, c.until)
		}
	}
}
