-- Receipts (docs/payments.md, "Receipts"): what an approval proved, kept
-- with the payment it released, so that its receipt can say so. approval
-- is {"acr", "authTime" (RFC 3339), "detailsSha256"}: the authentication's
-- class and time from the provider's ID token, and the SHA-256 (base64url)
-- of the canonical JSON (RFC 8785) of the authorization_details the
-- provider granted. None of it is secret; NULL for a payment never held,
-- or approved by an earlier version.

ALTER TABLE money_requests ADD COLUMN approval jsonb;

---- create above / drop below ----

ALTER TABLE money_requests DROP COLUMN approval;
