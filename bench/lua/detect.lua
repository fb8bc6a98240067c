-- The workload of bench/detection.py: recursion, a table sort, string building and matching.
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local t = {}
for i = 1, 40000 do t[i] = tostring(i * 7 % 1000) .. "x" end
table.sort(t)
local s = {}
for i = 1, 3000 do s[#s+1] = string.format("%d:%s", i, t[i]) end
local str = table.concat(s, ",")
local count = 0
for w in string.gmatch(str, "%d+") do count = count + 1 end
print(fib(22), #t, count)
