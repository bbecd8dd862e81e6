package app

import (
	"go.uber.org/zap"

	"seckill/edge"
	"seckill/engine"
)

// Queue mode's parts (engine.queue.enabled): the edge's Line, which
// appends the attempts of SKUs in queue mode, and the engine's Drainer,
// which serves them. Off, neither is built.

// buildLine builds the edge's Line and returns the edge option for it.
func (s *System) buildLine(log *zap.Logger) ([]edge.Option, error) {
	if !s.Cfg.Engine.Queue.Enabled {
		return nil, nil
	}
	if err := s.Cfg.OrderSigning.Required(); err != nil {
		return nil, err // attempts are signed like order messages
	}
	l, err := engine.NewLine(s.Cfg.Engine, s.Stock, s.Results, log.Named("line"))
	if err != nil {
		return nil, err
	}
	s.Line = l
	return []edge.Option{edge.WithQueue(l)}, nil
}

// buildDrainer joins the in-process engine's drainer to its group.
func (s *System) buildDrainer(log *zap.Logger) error {
	if !s.Cfg.Engine.Queue.Enabled || s.Local == nil {
		return nil
	}
	d, err := engine.NewDrainer(s.Local, s.Cfg.Engine.Queue, log.Named("drainer"), s.Reg)
	if err != nil {
		return err
	}
	s.Drainer = d
	return nil
}

// closeQueue stops the drainer, then the line (the edge has stopped).
func (s *System) closeQueue() []error {
	var errs []error
	if s.Drainer != nil {
		// Kept (Close is idempotent): forwardEvent reads it unlocked.
		errs = append(errs, s.Drainer.Close())
	}
	if s.Line != nil {
		errs = append(errs, s.Line.Close())
		s.Line = nil
	}
	return errs
}
