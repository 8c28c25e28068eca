-- @tables profile_facts

-- Facts about the profile as a whole (key/value; a key may repeat, e.g. `missing`).
SELECT key, value FROM profile_facts;
