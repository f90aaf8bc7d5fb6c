package engine

import "context"

// loadContext is the context a load's reads run under (a spec's Ctx, a
// warm-up's or a check's): ctx, or one that never ends when it is nil.
func loadContext(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
