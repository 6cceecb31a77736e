-- luacheck's settings for the scripts as Redis runs them (Lua 5.1 with Redis's globals).
std = "lua51"
read_globals = {"redis", "KEYS", "ARGV", "cjson"}
max_line_length = 120
