package projections

// seqList is an append-only list of seqs, in increasing order, kept in
// fixed-size chunks: appending never copies what is there (a list of
// millions grows without a pause under the write lock), and an element,
// once written, never changes, so a snapshot's cut may read the first n
// elements while the writer appends.
type seqList struct {
	chunks [][]uint64
	n      int
}

// seqChunk is the length of one chunk of a seqList.
const seqChunk = 4096

func (l *seqList) add(seq uint64) {
	if l.n%seqChunk == 0 {
		l.chunks = append(l.chunks, make([]uint64, 0, seqChunk))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, seq)
	l.n++
}

func (l *seqList) len() int { return l.n }

func (l *seqList) at(i int) uint64 { return l.chunks[i/seqChunk][i%seqChunk] }

// search returns the position of the first seq >= seq.
func (l *seqList) search(seq uint64) int {
	lo, hi := 0, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if l.at(m) < seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// seqsBefore returns at most max seqs of l below before (0: from the
// newest), newest first.
func (l *seqList) seqsBefore(before uint64, max int) []uint64 {
	end := l.n
	if before != 0 {
		end = l.search(before)
	}
	out := make([]uint64, 0, min(max, end))
	for i := end - 1; i >= 0 && len(out) < max; i-- {
		out = append(out, l.at(i))
	}
	return out
}

// seqs writes the first n seqs of l as deltas, calling tick every
// seqsPerTick of them: about the bytes of one session, a snapshot's
// object. It stops, returning false, when tick says to.
func (w *snapWriter) seqs(l *seqList, n int, tick func() (stop bool)) bool {
	w.len(n)
	var prev uint64
	for i := range n {
		s := l.at(i)
		w.uint(s - prev)
		prev = s
		if (i+1)%seqsPerTick == 0 && tick() {
			return false
		}
	}
	return true
}

const seqsPerTick = 32

func (r *snapReader) seqs(l *seqList) {
	var prev uint64
	for i, n := 0, r.len(); i < n && r.err == nil; i++ {
		prev += r.uint()
		l.add(prev)
	}
}
