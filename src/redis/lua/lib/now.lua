-- The server's time in ms: expiry is decided by the server's clock, never a client's.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
