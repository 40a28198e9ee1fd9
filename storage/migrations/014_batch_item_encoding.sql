-- A put item's content is kept as the batch request carried it, so a batch
-- is admitted without a decoded copy of each content: the JSON string
-- (quotes and escapes included) and its encoding, 'utf8' or 'base64'. It
-- is decoded when the item runs. NULL: the content is the bytes themselves
-- (items stored before, and items made by the server).
ALTER TABLE batch_items ADD COLUMN content_encoding text
    CHECK (content_encoding IN ('utf8', 'base64'));
