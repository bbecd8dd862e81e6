package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"seckill/edge"
	"seckill/internal/token"
	"seckill/sale"
)

// tokenVerifier adapts token.Tokens to the edge (edge.TokenVerifier,
// edge.TokenChecker and edge.TokenRefunder). The edge bounds each call
// (edge.token_verify_timeout, edge.token_refund_timeout); the adapter
// sorts token.Tokens' errors into the edge's two kinds.
type tokenVerifier struct{ t *token.Tokens }

// Check judges a token without I/O: every error is a refusal.
func (v tokenVerifier) Check(tok []byte, user int64, a *sale.Activity, sku int64, now time.Time) error {
	if _, err := v.t.Check(string(tok), a.ID, sku, user, now); err != nil {
		return fmt.Errorf("%w: %w", edge.ErrTokenRefused, err)
	}
	return nil
}

// Verify checks and spends a token: a token the package refuses is
// edge.ErrTokenRefused, a failure to spend it (Redis) edge.ErrTokenUnavailable.
func (v tokenVerifier) Verify(ctx context.Context, tok []byte, user int64, a *sale.Activity, sku int64, now time.Time) error {
	_, err := v.t.Verify(ctx, string(tok), a.ID, sku, user, now)
	switch {
	case err == nil:
		return nil
	case isTokenRejection(err):
		return fmt.Errorf("%w: %w", edge.ErrTokenRefused, err)
	}
	return fmt.Errorf("%w: %w", edge.ErrTokenUnavailable, err)
}

// Refund gives back a token the engine's "busy" answer wasted.
func (v tokenVerifier) Refund(ctx context.Context, tok []byte) {
	_ = v.t.Unspend(ctx, string(tok)) // failing, the buyer asks for a new token
}

func isTokenRejection(err error) bool {
	for _, e := range []error{token.ErrMalformed, token.ErrSignature, token.ErrExpired, token.ErrMismatch, token.ErrReplayed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
