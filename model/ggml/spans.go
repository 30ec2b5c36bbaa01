package ggml

// SpanStats counts, over the steps' attention groups, the KV slots a
// group's attention reads against the slots its blocks hold: a group's
// blocks are spread over the pool (forks, frees and other searches'
// blocks in between), and a span from its lowest block to its highest
// reads every slot between them. Each count is a group in one step;
// RowSpan, RowRead and RowUsed weigh the slots by the group's rows (a
// score and a mask element per row and slot: the attention's work), and
// Seen is the positions its rows see, summed over them (the work a row
// alone over its own positions would do).
type SpanStats struct {
	Groups, Rows              int
	Span, Read, Used          int64 // slots: the span (padded), what attention read, the blocks' own
	RowSpan, RowRead, RowUsed int64 // rows x slots
	Seen                      int64
	// SpanRatio and ReadRatio count the groups by Span/Used and by
	// Read/Used: SpanRatio[i] those at most SpanBuckets[i], the last
	// those beyond.
	SpanRatio, ReadRatio [len(SpanBuckets) + 1]int
}

// SpanBuckets are the upper bounds of SpanStats' ratio buckets.
var SpanBuckets = [...]float64{1, 1.25, 1.5, 2, 3, 4, 8, 16, 32, 64}

// GroupSpan is one attention group of one step: its rows, the slots of
// its span (padded), those its attention read, those of its blocks, and
// the positions its rows see, summed over them.
type GroupSpan struct{ Rows, Span, Read, Used, Seen int }

// spanCount is the backend's SpanStats and a test's hook.
type spanCount struct {
	SpanStats
	hook func(GroupSpan)
}

// add counts a group.
func (c *spanCount) add(g GroupSpan) {
	s, r := &c.SpanStats, int64(g.Rows)
	s.Groups++
	s.Rows += g.Rows
	s.Span, s.Read, s.Used = s.Span+int64(g.Span), s.Read+int64(g.Read), s.Used+int64(g.Used)
	s.RowSpan, s.RowRead, s.RowUsed = s.RowSpan+r*int64(g.Span), s.RowRead+r*int64(g.Read), s.RowUsed+r*int64(g.Used)
	s.Seen += int64(g.Seen)
	s.SpanRatio[bucket(g.Span, g.Used)]++
	s.ReadRatio[bucket(g.Read, g.Used)]++
	if c.hook != nil {
		c.hook(g)
	}
}

func bucket(x, used int) int {
	r := float64(x) / float64(max(used, 1))
	for i, b := range SpanBuckets {
		if r <= b {
			return i
		}
	}
	return len(SpanBuckets)
}

// Spans returns the attention's slots read and used over the steps so
// far (see SpanStats).
func (b *Backend) Spans() SpanStats { return b.spans.SpanStats }
