-- Schema 6: validity (bitemporal: when a memory held, beside when aril stored it). A turn may
-- say from when the memory it holds no longer does (a forgetting writes such a version); a card
-- says since when its content holds and, once forgotten, until when. Recall reads a turn's with
-- the row it already reads.
ALTER TABLE turns ADD COLUMN valid_to timestamptz;
ALTER TABLE cards ADD COLUMN valid_from timestamptz;
ALTER TABLE cards ADD COLUMN valid_to timestamptz;
-- Searches leave out the cards forgotten by now through this index.
CREATE INDEX cards_forgotten ON cards (valid_to) WHERE valid_to IS NOT NULL;
