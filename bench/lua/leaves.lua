-- A Lua workload of many small C functions (bench/leafframes.py): table gets and sets, short-string
-- interning, sorting through a comparison, pattern matching and calls.  ~0.5 s on a 2-vCPU VM.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local t, words = {}, {}
for i = 1, 200000 do t[i] = tostring(i * 7919 % 100003) .. "k" end
table.sort(t, function(a, b) return a < b end)
local seen = {}
for i = 1, #t do local k = t[i]:sub(1, 3); seen[k] = (seen[k] or 0) + 1 end
local s = table.concat(t, " ", 1, 20000)
for w in s:gmatch("%d+") do words[#words + 1] = w end
print(fib(27), #t, #words)
