-- Store contract check: a script that answers with an error reply.
return redis.error_reply('ERR boom')
