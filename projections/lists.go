package projections

import "sort"

// ListQuery is the paging of a list: at most Limit items, after the item
// StartingAfter (an id) in the list's order.
type ListQuery struct {
	Limit         int
	StartingAfter string
}

// Page is one page of a list, most recent first. More says whether items
// remain after it.
type Page[T any] struct {
	Data []T  `json:"data"`
	More bool `json:"-"`
}

// indexBySeq finds the position of seq in items, which are in increasing
// seq order: a binary search, so starting_after costs O(log n).
func indexBySeq[T any](items []T, seq uint64, seqOf func(T) uint64) int {
	return sort.Search(len(items), func(i int) bool { return seqOf(items[i]) >= seq })
}
