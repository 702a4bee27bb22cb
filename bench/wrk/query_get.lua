-- query_get.lua: GET /v1/query?fp=HEX16&k=K, the fingerprints taken in
-- turn from a file of hex16 lines, each wrk thread from its own offset.
-- Usage: wrk ... -s query_get.lua URL -- QUERIES_FILE [K]
local common = dofile("common.lua")
local paths, n, i = {}, 0, 0

setup = common.setup
done = common.done

function init(args)
   local fps = common.read_lines(args[1])
   local k = args[2] or "3"
   for j, fp in ipairs(fps) do
      paths[j] = "/v1/query?fp=" .. fp .. "&k=" .. k
   end
   n = #paths
   i = (tonumber(thread_id) or 0) * 7919 % n
end

function request()
   i = i % n + 1
   return wrk.format("GET", paths[i])
end
