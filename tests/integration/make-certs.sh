#!/bin/sh
# make-certs.sh DIR: a throw-away CA, a server certificate for 127.0.0.1
# and localhost, a client certificate, and an unrelated second CA.
set -eu
d=$1
mkdir -p "$d"
cd "$d"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=fmbroker test CA" \
    -keyout ca.key -out ca.pem 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=unrelated CA" \
    -keyout other-ca.key -out other-ca.pem 2>/dev/null
for who in server client; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$who" \
        -keyout "$who.key" -out "$who.csr" 2>/dev/null
done
printf "subjectAltName=IP:127.0.0.1,DNS:localhost\n" >server.ext
printf "extendedKeyUsage=clientAuth\n" >client.ext
for who in server client; do
    openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
        -days 2 -extfile "$who.ext" -out "$who.pem" 2>/dev/null
done
chmod 600 ./*.key
