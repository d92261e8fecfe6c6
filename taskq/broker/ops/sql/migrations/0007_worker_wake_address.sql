-- Where a worker on a cluster listens for wake-up hints from submitting
-- clients (host:port of a UDP socket); NULL: it only polls.

ALTER TABLE workers ADD COLUMN wake_address TEXT;
