// No zod here: the ops CLI sends the header, and loads nothing it does not need at start.

/**
 * The request header that makes a create safe to send again: Stripe's `Idempotency-Key`
 * (https://docs.stripe.com/api/idempotent_requests), which the IETF draft
 * https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/ describes; AWS's
 * client tokens (`ClientToken`) work the same way. Written in lower case, as the router and API
 * Gateway's declared parameters match header names (case-insensitive in HTTP: RFC 9110, 5.1).
 */
export const idempotencyKeyHeader = 'idempotency-key';

/** The header an answer made again for a key carries (Stripe's), `true`: nothing new was made. */
export const idempotentReplayedHeader = 'idempotent-replayed';

/** The longest key taken: Stripe's limit, and room for any UUID or a client's own scheme. */
export const maxIdempotencyKeyLength = 255;
