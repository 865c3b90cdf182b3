-- What a payment's content is, as a hash (the proxy's canonical
-- paymentInformation and redirectUrl): settling a lost answer treats only
-- requests with the same content as ones it could be confused with. Rows
-- from before have none, and settling treats them as confusable with all.
ALTER TABLE money_requests ADD COLUMN match_key bytea;

---- create above / drop below ----

ALTER TABLE money_requests DROP COLUMN match_key;
