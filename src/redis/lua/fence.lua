--! uses: high_water
-- KEYS: fence, lease. -> the high-water mark (0: no token was ever issued)
return string.format('%.0f', high_water(KEYS[1], KEYS[2]))
