package cpu

import (
	"github.com/entropix-search/entropix-search/kvcache"
	"github.com/entropix-search/entropix-search/model"
)

func init() { model.RegisterBackend("cpu", newBackend) }

// backend is a Runner as a model.Backend.
type backend struct{ *Runner }

func (b backend) Cache() *kvcache.Pool { return b.kv.Pool }
func (b backend) Close() error         { return nil }

// newBackend is the CPU's model.BackendFactory.
func newBackend(m *model.Model, c model.CacheConfig) (model.Backend, error) {
	r, err := New(m, c)
	if err != nil {
		return nil, err
	}
	return backend{r}, nil
}

// New returns a Runner of m over a new cache of c (model.Model.NewCache):
// the CPU backend, as model.NewBackend("cpu", m, c) makes it. The first
// on a model converts its weights for the kernels (WeightsOf).
func New(m *model.Model, c model.CacheConfig) (*Runner, error) {
	p, err := m.NewCache(c.Tokens, c.BlockSize, c.DType)
	if err != nil {
		return nil, err
	}
	r := NewRunner(m, NewCache(p))
	if r.initErr != nil {
		return nil, r.initErr
	}
	return r, nil
}
