package matrix

// Rooms is how many rooms the gateway remembers, for the flood test.
func (g *Gateway) Rooms() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.rooms)
}
