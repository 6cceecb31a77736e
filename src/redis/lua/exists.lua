-- KEYS: version per resource. -> index of the first missing one, or 0
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    return i
  end
end
return 0
