package model

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/entropix-search/entropix-search/kvcache"
)

// Backend runs a model's forward pass over a paged KV cache: the one seam
// between the search (package engine) and the compute. The cache's block
// manager (Cache) is shared: the search forks, frees and truncates its
// sequences between steps, and the backend keeps the keys and values of
// its blocks, by block id, performing the copies on write the manager
// decides (kvcache.Pool.TakeCopies). A Backend is used from one goroutine;
// the work inside a step may be parallel.
type Backend interface {
	// Cache returns the block manager of the backend's KV cache.
	Cache() *kvcache.Pool
	// Forward runs one step: every row's token goes through the whole
	// network and is appended to its sequence (at position Seq.Len());
	// attnLayers names the layers whose attention the Output should hold.
	// On error no sequence has changed; a full cache returns an error
	// wrapping kvcache.ErrCacheFull, a row past the context length one
	// wrapping ErrContextFull. See Output for how long its slices live.
	Forward(rows []Row, attnLayers ...int) (*Output, error)
	// Close releases the backend's resources (not the model's).
	Close() error
}

// CacheConfig sizes the KV cache a backend makes.
type CacheConfig struct {
	// Tokens is the capacity in token positions over all sequences,
	// counted in whole blocks.
	Tokens int
	// BlockSize is the positions per block; 16 when 0.
	BlockSize int
	// DType is the element type of the stored keys and values.
	DType kvcache.ElemType
}

// BackendFactory makes a backend running m over a new cache.
type BackendFactory func(m *Model, c CacheConfig) (Backend, error)

var (
	backendsMu sync.RWMutex
	backends   = map[string]BackendFactory{}
)

// RegisterBackend makes a backend available by name, as database/sql
// drivers are: the backend's package calls it from an init function, and
// a program imports that package for its side effect (the CPU's:
// import _ "github.com/entropix-search/entropix-search/model/cpu").
// Registering a name twice, or a nil factory, panics.
func RegisterBackend(name string, f BackendFactory) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if f == nil {
		panic("model: RegisterBackend of a nil factory")
	}
	if _, dup := backends[name]; dup {
		panic("model: RegisterBackend called twice for " + name)
	}
	backends[name] = f
}

// Backends returns the names of the registered backends, sorted.
func Backends() []string {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewBackend returns the backend registered as name, running m over a new
// cache of c.
func NewBackend(name string, m *Model, c CacheConfig) (Backend, error) {
	backendsMu.RLock()
	f := backends[name]
	backendsMu.RUnlock()
	if f == nil {
		if name == "cpu" {
			return nil, errors.New(`model: no backend "cpu" registered: import _ "github.com/entropix-search/entropix-search/model/cpu" in the program`)
		}
		return nil, fmt.Errorf("model: no backend %q registered (registered: %v): import its package in the program", name, Backends())
	}
	if m == nil {
		return nil, errors.New("model: NewBackend of a nil model")
	}
	return f(m, c)
}

// CheckRows reports the first row a forward step of m cannot run, or
// attention asked for a layer m does not have.
func (m *Model) CheckRows(rows []Row, attnLayers []int) error {
	c := &m.Config
	if len(rows) == 0 {
		return errors.New("model: empty batch")
	}
	for _, l := range attnLayers {
		if l < 0 || l >= c.Layers {
			return fmt.Errorf("model: attention asked for layer %d of %d", l, c.Layers)
		}
	}
	for i, row := range rows {
		if row.Seq == nil {
			return fmt.Errorf("model: row %d has no sequence", i)
		}
		if row.Token < 0 || row.Token >= c.Vocab {
			return fmt.Errorf("model: row %d: token %d is outside the vocabulary (0..%d)", i, row.Token, c.Vocab-1)
		}
	}
	return nil
}

// AppendRows reserves a cache position for every row (kv.Append), into
// pos, and returns it; a row past contextLen, or a full cache, rolls back
// the rows already appended and fails. The copies on write the appends
// decided are left for the backend to take, the rolled back ones
// included.
func AppendRows(kv *kvcache.Pool, rows []Row, contextLen int, pos []int) ([]int, error) {
	pos = pos[:0]
	for i, row := range rows {
		p := row.Seq.Len()
		var err error
		if p >= contextLen {
			err = fmt.Errorf("%w: position %d, context length %d", ErrContextFull, p, contextLen)
		} else {
			p, err = kv.Append(row.Seq)
		}
		if err != nil {
			for j := i - 1; j >= 0; j-- {
				_ = kv.Truncate(rows[j].Seq, pos[j])
			}
			return pos, fmt.Errorf("model: row %d: %w", i, err)
		}
		pos = append(pos, p)
	}
	return pos, nil
}

// RopeAngles writes the cosines and sines of the rotary embedding's
// angles at position pos, one per pair of a head's dimensions.
func (m *Model) RopeAngles(cos, sin []float32, pos int) {
	p := float64(pos)
	for j, f := range m.invFreq {
		s, co := math.Sincos(p * f)
		cos[j], sin[j] = float32(co), float32(s)
	}
}
