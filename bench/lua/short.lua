-- a short, library-heavy workload: recursion, a table sort, string.upper (toupper per character)
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local t = {}
for i = 1, 3000 do t[i] = (i * 7919) % 1000 end
table.sort(t)
local s = string.rep("hello world ", 40)
local acc = 0
for i = 1, 300 do acc = acc + #string.upper(s .. i) end
print(fib(17), acc)
