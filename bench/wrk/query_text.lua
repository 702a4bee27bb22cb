-- query_text.lua: POST /v1/query with the JSON bodies of a file, one a line
-- ({"text": "...", "k": 3}), taken in turn.
-- Usage: wrk ... -s query_text.lua URL -- BODIES_FILE
local common = dofile("common.lua")
local requests, n, i = {}, 0, 0

setup = common.setup
done = common.done

function init(args)
   local bodies = common.read_lines(args[1])
   local headers = {["Content-Type"] = "application/json"}
   for j, body in ipairs(bodies) do
      requests[j] = wrk.format("POST", "/v1/query", headers, body)
   end
   n = #requests
   i = (tonumber(thread_id) or 0) * 7919 % n
end

function request()
   i = i % n + 1
   return requests[i]
end
