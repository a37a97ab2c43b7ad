local add = capped_add(KEYS[2], ARGV[5], '*')
for i = 6, #ARGV do add[#add + 1] = ARGV[i] end
redis.call(unpack(add))