package tokens

// Refreshing counts the refresh-ahead mints this cache has started and
// not yet finished: once it is 0 after the requests that could start one
// have returned, no further refresh of theirs can come.
func (c *Cache) Refreshing() int {
	n := 0
	c.refresh.Range(func(any, any) bool { n++; return true })
	return n
}
