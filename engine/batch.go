package engine

import "seckill/stock"

// newBatcher is the engine's group commit when engine.batch is enabled
// (the default), else nil: one script call per buyer.
func newBatcher(cfg Config, st *stock.Stock, m *metrics) *stock.Batcher {
	if !cfg.Batch.Enabled {
		return nil
	}
	return st.NewBatcher(stock.BatcherConfig{MaxSize: cfg.Batch.MaxSize, Timeout: cfg.OccupyTimeout,
		OnBatch: func(n int) { m.batch.Observe(float64(n)) }})
}
