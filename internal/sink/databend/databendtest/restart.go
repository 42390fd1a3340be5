package databendtest

import (
	"fmt"
	"time"
)

// RestartNodeAtNextRequest restarts query node i (0-based) of the cluster
// just before the next HTTP request reaches the cluster (so a reply being
// written now still arrives), as a databend-query process restarts: it
// forgets its queries and the transactions they held, and it comes back
// under a new node id, since every databend-query process draws its
// node_id at start (query/config/src/inner.rs InnerConfig::init:
// cfg.query.node_id = GlobalUniq::unique()). A request still naming the
// old id in X-DATABEND-STICKY-NODE then finds no such node in the cluster
// and is answered 400 "Sticky session state lost" (servers/http/
// middleware/session.rs HTTPSessionEndpoint::call), which route already
// does.
func (s *Server) RestartNodeAtNextRequest(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restartNext = append(s.restartNext, i)
}

// restartPending restarts the nodes RestartNodeAtNextRequest named.
// Called with the lock held.
func (s *Server) restartPending() {
	for _, i := range s.restartNext {
		n := s.nodes[i]
		s.restarts++
		n.id = fmt.Sprintf("%s-r%d", n.id, s.restarts)
		n.started = time.Now().UTC().Format(time.RFC3339)
		n.queries = map[string]*query{}
		n.txns = map[string]idleTxn{}
	}
	s.restartNext = nil
}
