-- mix.lua: of every 10 requests, 9 GET /v1/query (fingerprints from a file,
-- as query_get.lua) and 1 POST /v1/documents in mode insert-if-new with a
-- new id and a random fingerprint (so nearly every one is inserted: a
-- durable log record before the answer).
-- Usage: wrk ... -s mix.lua URL -- QUERIES_FILE RUN_TAG [K] [TOKEN]
-- RUN_TAG makes ids unique across runs against one store.
local common = dofile("common.lua")
local paths, n, i, count, inserts = {}, 0, 0, 0, 0
local tag, k, headers

setup = common.setup
done = common.done

function init(args)
   local fps = common.read_lines(args[1])
   tag = args[2] or tostring(os.time())
   k = args[3] or "3"
   headers = common.json_headers(args[4])
   for j, fp in ipairs(fps) do
      paths[j] = "/v1/query?fp=" .. fp .. "&k=" .. k
   end
   n = #paths
   local t = tonumber(thread_id) or 0
   i = t * 7919 % n
   math.randomseed(os.time() + 1000003 * t)
   tag = tag .. "-" .. t
end

function request()
   count = count + 1
   if count % 10 == 0 then
      inserts = inserts + 1
      local body = string.format(
         '{"id":"wrk-%s-%d","fp":"%s","mode":"insert-if-new","k":%s}',
         tag, inserts, common.random_hex16(), k)
      return wrk.format("POST", "/v1/documents", headers, body)
   end
   i = i % n + 1
   return wrk.format("GET", paths[i])
end
