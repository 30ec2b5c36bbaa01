package ggml

// SpanStats counts, over the steps' attention groups, the KV slots a
// group's attention reads against the slots its blocks hold: a group's
// blocks are spread over the pool (forks, frees and other searches'
// blocks in between), and a span from its lowest block to its highest
// reads every slot between them. Each count is a group in one step;
// RowSpan, RowRead and RowUsed weigh the slots by the group's rows (a
// score and a mask element per row and slot: the attention's work).
type SpanStats struct {
	Groups, Rows              int
	Span, Read, Used          int64 // slots: the span (padded), what attention read, the blocks' own
	RowSpan, RowRead, RowUsed int64 // rows x slots
	// SpanRatio and ReadRatio count the groups by Span/Used and by
	// Read/Used: SpanRatio[i] those at most SpanBuckets[i], the last
	// those beyond.
	SpanRatio, ReadRatio [len(SpanBuckets) + 1]int
}

// SpanBuckets are the upper bounds of SpanStats' ratio buckets.
var SpanBuckets = [...]float64{1, 1.25, 1.5, 2, 3, 4, 8, 16, 32, 64}

// spanCount is the backend's SpanStats and a test's hook.
type spanCount struct {
	SpanStats
	hook func(rows, span, read, used int)
}

// add counts a group of rows rows whose span is span slots, of which
// attention read read, its blocks holding used.
func (c *spanCount) add(rows, span, read, used int) {
	s := &c.SpanStats
	s.Groups++
	s.Rows += rows
	s.Span, s.Read, s.Used = s.Span+int64(span), s.Read+int64(read), s.Used+int64(used)
	r := int64(rows)
	s.RowSpan, s.RowRead, s.RowUsed = s.RowSpan+r*int64(span), s.RowRead+r*int64(read), s.RowUsed+r*int64(used)
	s.SpanRatio[bucket(span, used)]++
	s.ReadRatio[bucket(read, used)]++
	if c.hook != nil {
		c.hook(rows, span, read, used)
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
